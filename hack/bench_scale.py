"""Kubernetes' scale envelope: 5000 nodes and 150,000 running pods (figures, no assertions).

Kubernetes supports clusters of up to 5000 nodes and 150,000 pods. This benchmark fills the
embedded cluster to that size and measures the scheduler against it, beside the same work on an
empty cluster of as many nodes. Every figure is printed with its goal; nothing is asserted.

How it runs (as ``bench_scheduler.py e2e``): ``pyscheduler sim up`` (nodes of 4 CPU / 32Gi /
110 pods whose bound pods stay Pending, as scheduler_perf's fake nodes) and ``pyscheduler run``
(the shipped configuration unless ``--schedule-fragment`` says otherwise) in their own
processes, on loopback; this process is the client.

Two embedded clusters of ``NODES`` nodes run side by side, each with its own scheduler:

1. **Empty cluster**: no pods. Its scheduler starts and waits.
2. **Full cluster**: filled before its scheduler
   starts with ``PODS`` pods bound by this benchmark (``spec.nodeName`` set at creation, as a
   DaemonSet's or a restarted scheduler's pods arrive), as a real cluster's workloads are laid
   out: 150 namespaces; in each, ReplicaSets as Deployments leave them (labels ``app`` and
   ``pod-template-hash``, the selector on both) of 2 to 250 replicas and five request sizes
   (25m–200m CPU, 64Mi–1Gi). Half of them have no constraint, three in ten a topology spread
   constraint (zone, maxSkew 1, DoNotSchedule, plus hostname ScheduleAnyway), one in ten a
   required pod anti-affinity on the hostname, one in ten a preferred one. Each ReplicaSet's
   replicas go to consecutive nodes (so zones alternate and no two share a node), skipping a
   node its pod does not fit. Pods are created first, each ReplicaSet after them, and the
   embedded controller adopts them (one ownerReference write per pod, as kube's ReplicaSet
   controller adopts matching orphans); the benchmark waits until every ReplicaSet reports its
   replicas. Deployment objects themselves are not created: the scheduler reads ReplicaSets.
   Then the embedded server's RSS and the time to LIST every pod (one request; and in pages of
   500, as the scheduler's informer lists) are measured, and:

   (a) ``pyscheduler run`` starts: the time to ``/readyz`` (every informer synced; polled every
       20 ms) and to the first binding (one pod waits for it, created before the start);
   (b) the scheduler's peak RSS (VmHWM) at the end;
   (c) throughput: batches of ``MEASURED`` new pods (100m / 500Mi, no owner, namespace
       ``bench``) created from 32 workers while a watcher notes each binding, on the empty and
       the full cluster in turn, ``ROUNDS`` rounds in the order empty, full, full, empty, ...
       (so that a drift of the machine's speed during the run weighs on both alike; the idle
       cluster's processes stay up). A batch's throughput is its pods over the time from the
       start of their creation to the last binding; also the average of scheduler_perf's 1 s
       samples (first dropped). The ratio pools the batches of each cluster;
   (d) an open-loop load of ``RATE`` pods/s for ``SECONDS`` s (each pod created on its tick
       whatever the previous ones do): latency from creation to binding. The API server writes
       creationTimestamp and the PodScheduled condition's lastTransitionTime in whole seconds
       (as kube-apiserver does), too coarse for this; the latency is therefore measured in this
       process, from the moment the create request is sent (``sent``) or its 201 answer read
       (``created``), to the moment the watch delivers the pod with ``spec.nodeName`` set.

Every load loop stops itself (a deadline per phase). The embedded API server costs far less CPU
per pod than kube-apiserver with etcd: figures against it are the scheduler's best case.

    python hack/bench_scale.py                       # 5000 nodes, 150,000 pods (minutes)
    python hack/bench_scale.py --pods 30000 --rate-seconds 20    # a quicker look
    python hack/bench_scale.py --skip-empty --json bench-scale.json
    python hack/bench_scale.py --profile /tmp/scale-profiles   # py-spy, see --help
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import orjson
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_perf_shapes import PySpy  # noqa: E402
from bench_apiserver import (  # noqa: E402
    Client,
    abba,
    cpu_seconds,
    in_order,
    interrupt,
    pooled,
    rate_samples,
    rss_kib,
    run_pool,
    run_scheduler,
    sim_up,
)

Obj = dict[str, Any]

GOALS = {"synced_s": 15.0, "rss_mib": 1536.0, "ratio": 0.8, "p99_ms": 250.0}
NODE_CPU_M, NODE_MEM_MI, NODE_PODS = 4000, 32 * 1024, 110
NAMESPACES = 150
SIZES = (2, 3, 5, 8, 10, 20, 30, 50, 100, 250)
REQUESTS = ((50, 128), (100, 256), (50, 512), (200, 1024), (25, 64))  # (m CPU, Mi)
ZONES = 3
#: Measured pods (100m / 500Mi) every node of the full cluster keeps room for.
NODES_ROOM_PODS = 6
PHASE_SECONDS = 600.0  # every wait of a phase ends after this long


# -- the workloads ---------------------------------------------------------------------------

class Workload:
    """One ReplicaSet (as a Deployment leaves it) and where its pods go."""

    def __init__(self, index: int, namespace: str, replicas: int) -> None:
        self.index = index
        self.namespace = namespace
        self.name = f"app-{index}"
        self.hash = f"{index * 2654435761 % 0xFFFFFFFF:08x}"[:10]
        self.replicas = replicas
        mix = (index * 2654435761) >> 8
        self.cpu_m, self.mem_mi = REQUESTS[mix // len(SIZES) % len(REQUESTS)]
        kind = index % 10
        self.shape = ("plain" if kind < 5 else "spread" if kind < 8
                      else "anti-affinity" if kind == 8 else "preferred-anti-affinity")
        self.nodes: list[int] = []

    @property
    def labels(self) -> dict[str, str]:
        return {"app": self.name, "pod-template-hash": self.hash}

    def pod_spec(self) -> Obj:
        spec: Obj = {"schedulerName": "pyscheduler", "containers": [{
            "name": "app", "image": f"registry.example.com/{self.name}:v1",
            "resources": {"requests": {"cpu": f"{self.cpu_m}m",
                                       "memory": f"{self.mem_mi}Mi"}}}]}
        selector = {"matchLabels": {"app": self.name}}
        if self.shape == "spread":
            spec["topologySpreadConstraints"] = [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                 "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector,
                 "matchLabelKeys": ["pod-template-hash"]},
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                 "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}]
        elif self.shape == "anti-affinity":
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}}
        elif self.shape == "preferred-anti-affinity":
            spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {
                    "labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}}]}}
        return spec

    def replica_set(self) -> Obj:
        return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": f"{self.name}-{self.hash}", "namespace": self.namespace,
                             "labels": self.labels},
                "spec": {"replicas": self.replicas,
                         "selector": {"matchLabels": self.labels},
                         "template": {"metadata": {"labels": self.labels},
                                      "spec": self.pod_spec()}}}

    def pod(self, k: int) -> Obj:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{self.name}-{self.hash}-{k:05d}",
                             "namespace": self.namespace, "labels": self.labels},
                "spec": {**self.pod_spec(), "nodeName": f"node-{self.nodes[k]}"}}


def plan(pods: int, nodes: int) -> list[Workload]:
    """Workloads totalling ``pods`` replicas, each replica given a node it fits on."""
    workloads: list[Workload] = []
    total = 0
    i = 0
    while total < pods:
        size = min(SIZES[((i * 2654435761) >> 8) % len(SIZES)], pods - total, nodes)
        workloads.append(Workload(i, f"team-{i % NAMESPACES}", size))
        total += size
        i += 1
    cpu = [0] * nodes
    mem = [0] * nodes
    count = [0] * nodes
    # Leave room for the measured pods: the full cluster must still take them all.
    cpu_cap, mem_cap = NODE_CPU_M - NODES_ROOM_PODS * 100, NODE_MEM_MI - 4096
    cursor = 0
    for w in workloads:
        used: set[int] = set()
        for _ in range(w.replicas):
            for _ in range(nodes):
                n = cursor % nodes
                cursor += 1
                if (n not in used and cpu[n] + w.cpu_m <= cpu_cap
                        and mem[n] + w.mem_mi <= mem_cap and count[n] < NODE_PODS - 20):
                    break
            else:
                raise SystemExit(f"{pods} pods do not fit on {nodes} nodes")
            used.add(n)
            w.nodes.append(n)
            cpu[n] += w.cpu_m
            mem[n] += w.mem_mi
            count[n] += 1
    return workloads


def measured_pod(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"schedulerName": "pyscheduler", "containers": [{
                "name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


# -- following bindings ----------------------------------------------------------------------

class Bindings:
    """A watch on the pods of namespace ``bench``: the time each is first seen bound."""

    def __init__(self, c: Client) -> None:
        self.c = c
        self.bound: dict[str, float] = {}
        self.reconnects = 0
        self._changed = asyncio.Event()

    async def run(self, rv: str) -> None:
        while True:
            url = (f"{self.c.base}/api/v1/namespaces/bench/pods?watch=true&resourceVersion={rv}"
                   f"&allowWatchBookmarks=true&timeoutSeconds=1800")
            try:
                async with self.c.session.get(url) as resp:
                    async for line in resp.content:
                        now = time.monotonic()
                        ev = orjson.loads(line)
                        obj = ev["object"]
                        if ev["type"] == "ERROR":
                            raise RuntimeError(f"watch failed: {obj}")
                        rv = obj["metadata"]["resourceVersion"]
                        if ev["type"] in ("ADDED", "MODIFIED") and obj["spec"].get("nodeName"):
                            name = obj["metadata"]["name"]
                            if name not in self.bound:
                                self.bound[name] = now
                                self._changed.set()
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass
            self.reconnects += 1

    async def wait(self, names: list[str], deadline: float) -> bool:
        """Wait until every pod of ``names`` is bound, or ``deadline`` (monotonic) passes."""
        while True:
            if all(n in self.bound for n in names):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 1.0))


async def start_following(c: Client) -> tuple[Bindings, asyncio.Task[None]]:
    status, body = await c.request("GET", "/api/v1/namespaces/bench/pods?limit=1")
    rv = orjson.loads(body)["metadata"]["resourceVersion"]
    follower = Bindings(c)
    return follower, asyncio.create_task(follower.run(rv))


async def create(c: Client, path: str, body: Obj, ok: tuple[int, ...] = (201,)) -> bytes:
    status, resp = await c.request("POST", path, body)
    if status not in ok:
        raise RuntimeError(f"create {path} failed {status}: {resp[:300]!r}")
    return resp


async def wait_ready(port: int, sched_pid: int, deadline: float) -> float | None:
    """Poll the scheduler's /readyz every 20 ms: the monotonic time it first answers 200."""
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            if not Path(f"/proc/{sched_pid}").exists():
                raise RuntimeError("the scheduler exited before it was ready")
            with contextlib.suppress(aiohttp.ClientError):
                async with s.get(f"http://127.0.0.1:{port}/readyz") as r:
                    if r.status == 200:
                        return time.monotonic()
            await asyncio.sleep(0.02)
    return None


# -- phases ----------------------------------------------------------------------------------

async def throughput(c: Client, follower: Bindings, prefix: str, n: int,
                     sched_pid: int, server_pid: int) -> Obj:
    """(c): ``n`` pods from 32 workers; the rate they are bound at, and what each process
    (the scheduler, the API server, this load generator) spent on them."""
    names = [f"{prefix}-{i}" for i in range(n)]
    cpu0 = cpu_seconds(sched_pid)
    server0, own0 = cpu_seconds(server_pid), cpu_seconds(os.getpid())
    t0 = time.monotonic()

    async def one(i: int) -> None:
        await create(c, "/api/v1/namespaces/bench/pods", measured_pod(names[i]))

    await run_pool(n, 32, one)
    created = time.monotonic() - t0
    complete = await follower.wait(names, time.monotonic() + PHASE_SECONDS)
    times = [follower.bound[x] for x in names if x in follower.bound]
    samples = rate_samples(times)
    last = max(times) if times else t0
    return {"pods": n, "bound": len(times), "complete": complete,
            "creation_seconds": created,
            "pods_per_second": len(times) / (last - t0) if last > t0 else 0.0,
            "sample_average": statistics.mean(samples) if samples else 0.0,
            "samples": samples,
            "scheduler_cpu_seconds_per_1000_pods":
                (cpu_seconds(sched_pid) - cpu0) / max(len(times), 1) * 1000,
            "server_cpu_seconds_per_1000_pods":
                (cpu_seconds(server_pid) - server0) / max(len(times), 1) * 1000,
            "load_cpu_seconds_per_1000_pods":
                (cpu_seconds(os.getpid()) - own0) / max(len(times), 1) * 1000}


async def open_loop(c: Client, follower: Bindings, rate: float, seconds: float) -> Obj:
    """(d): one pod every 1/rate s for ``seconds`` s; creation-to-binding latency."""
    n = int(rate * seconds)
    names = [f"steady-{i}" for i in range(n)]
    sent: dict[str, float] = {}
    answered: dict[str, float] = {}
    failures = 0

    async def one(name: str) -> None:
        nonlocal failures
        sent[name] = time.monotonic()
        try:
            await create(c, "/api/v1/namespaces/bench/pods", measured_pod(name))
            answered[name] = time.monotonic()
        except (RuntimeError, aiohttp.ClientError):
            failures += 1

    t0 = time.monotonic()
    tasks = []
    late = 0.0
    for i, name in enumerate(names):
        tick = t0 + i / rate
        delay = tick - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            late = max(late, -delay)
        tasks.append(asyncio.create_task(one(name)))
    await asyncio.gather(*tasks)
    await follower.wait(names, time.monotonic() + 60.0)
    from_sent = [(follower.bound[x] - sent[x]) * 1000 for x in names if x in follower.bound]
    from_created = [(follower.bound[x] - answered[x]) * 1000 for x in names
                    if x in follower.bound and x in answered]

    def q(values: list[float]) -> Obj:
        if not values:
            return {}
        p = np.percentile(np.asarray(values), [50, 90, 99])
        return {"p50": float(p[0]), "p90": float(p[1]), "p99": float(p[2]),
                "max": max(values)}

    return {"rate": rate, "seconds": seconds, "pods": n, "bound": len(from_sent),
            "failed_creates": failures, "max_tick_lateness_ms": late * 1000,
            "latency_ms_from_sent": q(from_sent), "latency_ms_from_created": q(from_created)}


async def list_times(c: Client) -> Obj:
    """The time to LIST every pod: one request, and in pages of 500 (as the informer).

    ``received``: until the last byte of the answer is in (pages: each page's continue token
    is read from its first bytes, not from a decoded page); ``decoded``: the client's JSON
    decoding of it all besides (orjson, this process; the scheduler pays that too)."""
    out: Obj = {}
    for label, path in (("one_request", "/api/v1/pods"),
                        ("pages_of_500", "/api/v1/pods?limit=500")):
        received, decoded = [], []
        items = 0
        size = 0
        for _ in range(3):
            t = time.monotonic()
            next_path: str | None = path
            bodies = []
            while next_path:
                status, body = await c.request("GET", next_path)
                if status != 200:
                    raise RuntimeError(f"list failed {status}: {body[:300]!r}")
                bodies.append(body)
                head = body[:body.find(b'"items"')]
                token = orjson.loads(head.rstrip(b",") + b"}")["metadata"].get("continue")
                next_path = f"{path}&continue={token}" if token else None
            received.append(time.monotonic() - t)
            t = time.monotonic()
            items = sum(len(orjson.loads(b)["items"]) for b in bodies)
            decoded.append(time.monotonic() - t)
            size = sum(len(b) for b in bodies)
        out[label] = {"items": items, "bytes": size,
                      "received_median_ms": statistics.median(received) * 1000,
                      "decoded_median_ms": statistics.median(decoded) * 1000}
    return out


async def fill(c: Client, workloads: list[Workload], concurrency: int) -> Obj:
    """Create every workload's pods (bound), then its ReplicaSet; wait for the adoptions."""
    for ns in sorted({w.namespace for w in workloads}):
        await create(c, "/api/v1/namespaces", {"metadata": {"name": ns}}, (201, 409))
    jobs = [(w, k) for w in workloads for k in range(w.replicas)]
    t0 = time.monotonic()

    async def one_pod(i: int) -> None:
        w, k = jobs[i]
        await create(c, f"/api/v1/namespaces/{w.namespace}/pods", w.pod(k))

    await run_pool(len(jobs), concurrency, one_pod)
    pods_seconds = time.monotonic() - t0
    t1 = time.monotonic()

    async def one_rs(i: int) -> None:
        w = workloads[i]
        await create(c, f"/apis/apps/v1/namespaces/{w.namespace}/replicasets", w.replica_set())

    await run_pool(len(workloads), concurrency, one_rs)
    deadline = time.monotonic() + PHASE_SECONDS
    adopted = 0
    while time.monotonic() < deadline:
        status, body = await c.request("GET", "/apis/apps/v1/replicasets")
        items = orjson.loads(body)["items"]
        adopted = sum(1 for rs in items
                      if (rs.get("status") or {}).get("replicas") == rs["spec"]["replicas"])
        if adopted == len(workloads):
            break
        await asyncio.sleep(1.0)
    return {"pods": len(jobs), "replica_sets": len(workloads), "adopted_replica_sets": adopted,
            "pods_seconds": pods_seconds, "pods_per_second": len(jobs) / pods_seconds,
            "adoption_seconds": time.monotonic() - t1,
            "shapes": {shape: sum(w.replicas for w in workloads if w.shape == shape)
                       for shape in ("plain", "spread", "anti-affinity",
                                     "preferred-anti-affinity")}}


def spy_on(directory: Path | None, name: str | None, pid: int) -> PySpy:
    """py-spy recording ``pid`` into DIR/NAME.raw, when ``--profile DIR`` was given."""
    if directory is None or name is None:
        return PySpy(None, pid)
    directory.mkdir(parents=True, exist_ok=True)
    return PySpy(directory / f"{name}.raw", pid)


def scheduler_config(workdir: Path, port: int, schedule_fragment: str) -> Path:
    path = workdir / "sched.yaml"
    path.write_text(yaml.safe_dump({
        "leaderElection": {"enabled": False}, "metricsAddress": f"127.0.0.1:{port}",
        "logLevel": os.environ.get("BENCH_SCHEDULER_LOG_LEVEL", "warning"),
        "scheduleFragment": None if schedule_fragment == "none" else schedule_fragment}))
    return path


class Cluster:
    """One embedded cluster and the scheduler against it, alive across the phases, so that
    the empty and the full cluster's (c) batches can alternate in time."""

    def __init__(self, label: str, workdir: Path, sim: Any, client: Client) -> None:
        self.label = label
        self.workdir = workdir
        self.sim = sim
        self.c = client
        self.sched: Any = None
        self.follower: Bindings | None = None
        self.watch: asyncio.Task[None] | None = None
        self.result: Obj = {"throughput": []}

    async def close(self) -> None:
        if self.watch is not None:
            self.watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.watch
        await self.c.session.close()
        interrupt(self.sched)


async def open_cluster(args: argparse.Namespace, stack: contextlib.AsyncExitStack,
                       workloads: list[Workload] | None, port: int) -> Cluster:
    """Start an embedded cluster, fill it (when ``workloads``), start the scheduler: (a)."""
    label = "full" if workloads else "empty"
    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    (workdir / "cluster.yaml").write_text(yaml.safe_dump({
        "nodePools": [{"name": "node", "count": args.nodes, "cpu": "4", "memory": "32Gi",
                       "pods": NODE_PODS}], "kubelet": {"runPods": False}}))
    t = time.monotonic()
    sim = sim_up(workdir, workdir / "cluster.yaml", "--watch-history", "50000",
                 "--no-cloud", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    stack.callback(interrupt, sim)  # after the scheduler and the client (last in, first out)
    cluster = Cluster(label, workdir, sim,
                      Client(workdir / "kubeconfig", max(args.concurrency, 64) + 8))
    stack.push_async_callback(cluster.close)
    result, c = cluster.result, cluster.c
    result["cluster_start_seconds"] = time.monotonic() - t
    await create(c, "/api/v1/namespaces", {"metadata": {"name": "bench"}}, (201, 409))
    if workloads:
        result["fill"] = await fill(c, workloads, args.concurrency)
        rss, peak = rss_kib(sim.pid)
        result["server_rss_mib"] = rss / 1024
        result["server_peak_rss_mib"] = peak / 1024
        result["list_all_pods"] = await list_times(c)
    cluster.follower, cluster.watch = await start_following(c)
    await create(c, "/api/v1/namespaces/bench/pods", measured_pod("first"))
    config = scheduler_config(workdir, port, args.schedule_fragment)
    server_cpu0 = cpu_seconds(sim.pid)
    t0 = time.monotonic()
    cluster.sched = run_scheduler(workdir / "kubeconfig", config,
                                  {**os.environ, "PYTHONUNBUFFERED": "1"})
    spy = spy_on(args.profile, f"{label}-scheduler-start" if workloads else None,
                 cluster.sched.pid)
    ready = await wait_ready(port, cluster.sched.pid, t0 + PHASE_SECONDS)
    spy.stop()
    result["synced_seconds"] = ready - t0 if ready is not None else None
    await cluster.follower.wait(["first"], t0 + PHASE_SECONDS)
    first = cluster.follower.bound.get("first")
    result["first_binding_seconds"] = first - t0 if first is not None else None
    result["scheduler_rss_after_sync_mib"] = rss_kib(cluster.sched.pid)[0] / 1024
    result["server_cpu_seconds_during_start"] = cpu_seconds(sim.pid) - server_cpu0
    return cluster


async def batch(args: argparse.Namespace, cluster: Cluster, number: int) -> None:
    """(c): one batch of ``MEASURED`` new pods on ``cluster``."""
    assert cluster.follower is not None
    spies = [spy_on(args.profile, f"{cluster.label}-throughput{number}-{who}", pid)
             for who, pid in (("server", cluster.sim.pid), ("scheduler", cluster.sched.pid))]
    cluster.result["throughput"].append(await throughput(
        cluster.c, cluster.follower, f"pod{number}", args.measured, cluster.sched.pid,
        cluster.sim.pid))
    for spy in spies:
        spy.stop()


async def steady(args: argparse.Namespace, cluster: Cluster) -> None:
    """(d) on ``cluster``."""
    assert cluster.follower is not None
    spies = [spy_on(args.profile, f"{cluster.label}-steady-{who}", pid)
             for who, pid in (("server", cluster.sim.pid), ("scheduler", cluster.sched.pid))]
    cluster.result["steady"] = await open_loop(cluster.c, cluster.follower, args.rate,
                                               args.rate_seconds)
    for spy in spies:
        spy.stop()


def finish(cluster: Cluster) -> Obj:
    result = cluster.result
    result["scheduler_peak_rss_mib"] = rss_kib(cluster.sched.pid)[1] / 1024
    result["server_rss_end_mib"] = rss_kib(cluster.sim.pid)[0] / 1024
    assert cluster.follower is not None
    result["watch_reconnects"] = cluster.follower.reconnects
    return result


async def measure(args: argparse.Namespace, workloads: list[Workload]) -> tuple[Obj | None, Obj]:
    port = 10300 + os.getpid() % 1000
    async with contextlib.AsyncExitStack() as stack:
        clusters: dict[str, Cluster] = {}
        if not args.skip_empty:
            clusters["empty"] = await open_cluster(args, stack, None, port + 1)
        clusters["full"] = await open_cluster(args, stack, workloads, port)
        number = 0
        for label in abba(args.rounds, "empty", "full"):
            if label in clusters:
                number += 1
                await batch(args, clusters[label], number)
        if args.rate_seconds > 0:
            await steady(args, clusters["full"])
            if "empty" in clusters and args.steady_on_empty:
                await steady(args, clusters["empty"])
        results = {label: finish(cluster) for label, cluster in clusters.items()}
    return results.get("empty"), results["full"]


# -- output ----------------------------------------------------------------------------------

def _f(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def pooled_throughput(batches: list[Obj]) -> Obj:
    """(c) over several batches of one cluster (:func:`pooled`), and their 1 s samples."""
    samples = [x for t in batches for x in t["samples"]]
    out: Obj = {"pods": sum(t["pods"] for t in batches),
                "pods_per_second": pooled(batches, "pods_per_second"),
                "sample_average": statistics.mean(samples) if samples else 0.0}
    for key in ("scheduler", "server", "load"):
        name = f"{key}_cpu_seconds_per_1000_pods"
        out[name] = pooled(batches, name)
    return out


def report(args: argparse.Namespace, empty: Obj | None, full: Obj) -> None:
    print(f"\n== scale: {args.nodes} nodes, {args.pods} bound pods "
          f"(scheduleFragment {args.schedule_fragment}; embedded API server; python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cores)")
    fill_ = full["fill"]
    print(f"  fill: {fill_['pods']} pods in {fill_['pods_seconds']:.0f} s "
          f"({fill_['pods_per_second']:.0f}/s), {fill_['replica_sets']} ReplicaSets adopted "
          f"theirs in {fill_['adoption_seconds']:.0f} s "
          f"({fill_['adopted_replica_sets']} complete); shapes "
          + ", ".join(f"{k} {v}" for k, v in fill_["shapes"].items()))
    lists = full["list_all_pods"]
    one, pages = lists["one_request"], lists["pages_of_500"]
    print(f"  embedded API server with {args.pods} pods: RSS {full['server_rss_mib']:.0f} MiB "
          f"(peak {full['server_peak_rss_mib']:.0f}); LIST all pods (JSON, "
          f"{one['bytes'] / 1e6:.0f} MB) received in {one['received_median_ms']:.0f} ms as one "
          f"answer, {pages['received_median_ms']:.0f} ms in pages of 500; the client's "
          f"decoding besides: {one['decoded_median_ms']:.0f} / "
          f"{pages['decoded_median_ms']:.0f} ms (medians of 3)")
    rows = [("(a) start to caches synced", _f(full["synced_seconds"], 2) + " s",
             f"<= {GOALS['synced_s']:.0f} s",
             _f(empty["synced_seconds"], 2) + " s" if empty else "–"),
            ("(a) start to first pod bound", _f(full["first_binding_seconds"], 2) + " s", "–",
             _f(empty["first_binding_seconds"], 2) + " s" if empty else "–"),
            ("(b) scheduler peak RSS", f"{full['scheduler_peak_rss_mib']:.0f} MiB",
             f"<= {GOALS['rss_mib']:.0f} MiB",
             f"{empty['scheduler_peak_rss_mib']:.0f} MiB" if empty else "–"),
            ("    scheduler RSS after sync", f"{full['scheduler_rss_after_sync_mib']:.0f} MiB",
             "–", f"{empty['scheduler_rss_after_sync_mib']:.0f} MiB" if empty else "–")]
    tf = pooled_throughput(full["throughput"])
    te = pooled_throughput(empty["throughput"]) if empty else None
    ratio = tf["pods_per_second"] / te["pods_per_second"] if te and te["pods_per_second"] else None
    rows.append((f"(c) {tf['pods']} new pods, pods/s (overall)",
                 f"{tf['pods_per_second']:.0f}", "–", f"{te['pods_per_second']:.0f}" if te else "–"))
    rows.append(("    pods/s (1 s samples, average)", f"{tf['sample_average']:.0f}", "–",
                 f"{te['sample_average']:.0f}" if te else "–"))
    rows.append(("    full / empty", _f(ratio, 2), f">= {GOALS['ratio']}", ""))
    for key, label in (("scheduler", "scheduler"), ("server", "API server"),
                       ("load", "load generator")):
        rows.append((f"    {label} CPU s per 1000 pods",
                     f"{tf[key + '_cpu_seconds_per_1000_pods']:.2f}", "–",
                     f"{te[key + '_cpu_seconds_per_1000_pods']:.2f}" if te else "–"))
    st = full.get("steady")
    if st:
        for key, label in (("latency_ms_from_sent", "create sent"),
                           ("latency_ms_from_created", "201 read")):
            lat = st[key]
            empty_lat = (empty or {}).get("steady", {}).get(key, {})
            rows.append((f"(d) {st['rate']:.0f} pods/s, {label} -> bound p50",
                         f"{lat.get('p50', 0):.0f} ms", "–",
                         f"{empty_lat['p50']:.0f} ms" if empty_lat else "–"))
            rows.append(("    p99", f"{lat.get('p99', 0):.0f} ms",
                         f"<= {GOALS['p99_ms']:.0f} ms",
                         f"{empty_lat['p99']:.0f} ms" if empty_lat else "–"))
        rows.append(("    bound / created", f"{st['bound']} / {st['pods']}", "", ""))
    batches = in_order(abba(len(full["throughput"]), "empty", "full"),
                       {"full": full["throughput"], "empty": (empty or {}).get("throughput", [])})
    print(f"  (c) batches of {args.measured} pods in the order run: "
          + ", ".join(f"{label} {t['pods_per_second']:.0f}/s" for label, t in batches))
    if empty:
        print("  (c) full / empty per round: " + ", ".join(
            f"{f['pods_per_second'] / e['pods_per_second']:.2f}"
            for e, f in zip(empty["throughput"], full["throughput"]) if e["pods_per_second"]))
    print(f"  {'figure':44s} {'full':>10s} {'goal':>12s} {'empty':>10s}")
    for name, value, goal, other in rows:
        print(f"  {name:44s} {value:>10s} {goal:>12s} {other:>10s}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150000, help="bound pods filling the cluster")
    parser.add_argument("--measured", type=int, default=10000, help="(c): new pods measured")
    parser.add_argument("--rounds", type=int, default=2,
                        help="(c): rounds of one batch on each cluster, in ABBA order")
    parser.add_argument("--rate", type=float, default=100.0, help="(d): pods per second")
    parser.add_argument("--rate-seconds", type=float, default=60.0,
                        help="(d): seconds of steady load (0: skip)")
    parser.add_argument("--concurrency", type=int, default=64, help="workers filling the cluster")
    parser.add_argument("--schedule-fragment", default="default:v1.0.0",
                        help="the scheduler's scheduleFragment (none: the built-ins alone)")
    parser.add_argument("--skip-empty", action="store_true",
                        help="do not measure the empty cluster")
    parser.add_argument("--steady-on-empty", action="store_true",
                        help="also run (d) on the empty cluster")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="py-spy records (raw collapsed stacks) into DIR: the scheduler's "
                             "start on the full cluster and its (c) on both, both processes "
                             "during (d)")
    args = parser.parse_args()
    room = NODES_ROOM_PODS * args.nodes
    wanted = args.rounds * args.measured + int(args.rate * args.rate_seconds) + 1
    if wanted > room:
        parser.error(f"--rounds x --measured + --rate x --rate-seconds = {wanted} new pods do "
                     f"not fit in the room the full cluster leaves ({room} pods of 100m)")
    workloads = plan(args.pods, args.nodes)
    try:
        import uvloop
        empty, full = uvloop.run(measure(args, workloads))
    except ImportError:
        empty, full = asyncio.run(measure(args, workloads))
    report(args, empty, full)
    if args.json:
        args.json.write_text(json.dumps({"empty": empty, "full": full}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

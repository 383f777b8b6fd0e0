"""Scheduler benchmarks in the style of Kubernetes' scheduler_perf (figures, no assertions).

Scenarios use nodes of 4 CPU / 32Gi / 110 pods and pods requesting 100m / 500Mi.

* ``algorithm``: the scheduling algorithm alone (no API server): a cache with N nodes and some
  initial pods, then every measured pod goes through the full pipeline (every node filtered and
  scored) and is assumed on its node, with the pods' default logic selected and evaluated as the
  scheduler does (``--schedule-fragment``, ``default:v1.0.0`` unless ``none``: the built-in
  profile alone). Reports pods/s and attempt latency percentiles.
* ``e2e``: ``pyscheduler sim up`` (bound pods stay Pending, as on scheduler_perf's fake nodes)
  and ``pyscheduler run`` in separate processes; initial pods are created and scheduled, then the
  measured pods are created while a watcher counts bindings in 1 s samples (first dropped).
  Reports throughput average/p50/p90/p99, scheduler CPU seconds per 1000 pods, the scheduler's
  peak RSS, its attempt latency percentiles (from its own /metrics), and the bind ceiling of the
  same API server measured right after with concurrent binding clients.
  ``--pod-fragment replace|extend`` annotates every pod with a fragment resource serving the
  packaged default fragment in that mode (filter and score), so the built-in profile and a
  fragment doing the same job can be compared end to end (run with ``--schedule-fragment none``).
* ``pairs``: the shipped configuration (``--schedule-fragment``, ``default:v1.0.0``) against the
  built-in profile alone, end to end as ``e2e``: two embedded clusters of ``--nodes`` nodes,
  each with its own scheduler and ``--initial`` pods, both up at once; then ``--rounds``
  rounds of one batch of ``--pods`` pods per configuration, alternating shipped, built-ins,
  built-ins, shipped, ... (ABBA: the machine's speed drifts by 10–20 % within minutes here, and
  alternating batches weigh a drift on both alike, where separate runs minutes apart do not).
  Reports each pair's ratio, the pooled ratio and each side's scheduler CPU per 1000 pods.
* ``--py-spy FILE`` (e2e): py-spy samples the scheduler process over the measured pods and
  writes FILE (``.txt``: collapsed stacks, ``.json``: speedscope, otherwise a flame graph SVG).
* ``--node-images N`` (algorithm): every node lists N images in ``status.images`` (two names
  each, as the kubelet reports tag and digest), drawn from 4 N distinct images; on one node in
  three, one of them is the measured pods' image, so ImageLocality scores through its index
  rather than finding nothing.

Results are printed as a table and written as JSON (``--json FILE``).

    python hack/bench_scheduler.py algorithm --nodes 5000 --pods 10000
    python hack/bench_scheduler.py e2e --nodes 5000 --initial 1000 --pods 10000
    python hack/bench_scheduler.py pairs --rounds 3   # shipped against built-ins, ABBA
    python hack/bench_scheduler.py all        # the three scheduler_perf scenarios + algorithm
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pyscheduler.config import parse_config
from pyscheduler.framework.cache import Cache
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import node_info
from pyscheduler.framework.pipeline import Pipeline
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.registry import build_profile
from pyscheduler.wasm.manager import FragmentManager

sys.path.insert(0, str(Path(__file__).parent))
from bench_apiserver import (  # noqa: E402
    Client,
    abba,
    count_bindings,
    cpu_seconds,
    fake_nodes_and_scheduler,
    in_order,
    pooled,
    rate_samples,
    rss_kib,
    run_pool,
)


POD_IMAGE = "registry.k8s.io/pause:3.10"


def node_obj(i: int, images: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}
    if images:
        listed = [{"names": [f"registry.example.com/team-{k % 40}/app-{k}:v{k % 7}",
                             f"registry.example.com/team-{k % 40}/app-{k}@sha256:{k:064x}"],
                   "sizeBytes": 50_000_000 + 1_000_000 * (k % 700)}
                  for k in ((i * 7 + j * 13) % (4 * images) for j in range(images))]
        if i % 3 == 0:
            listed[0] = {"names": [POD_IMAGE], "sizeBytes": 320_000_000}
        status["images"] = listed
    return {"metadata": {"name": f"node-{i}", "labels": {
        "kubernetes.io/hostname": f"node-{i}", "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
            "status": status}


FRAGMENT_RESOURCE = "bench-v1.0.0"
PACKAGED_FRAGMENTS = Path(__file__).resolve().parents[1] / "pyscheduler" / "wasm" / "fragments"
CRD = Path(__file__).resolve().parents[1] / "manifests" / "crd-wsspschedulerconfiguration.yaml"


def pod_obj(i: int, prefix: str = "pod", node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "pyscheduler", "containers": [{
        "name": "c", "image": POD_IMAGE,
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": f"{prefix}-{i}", "namespace": "bench", "uid": f"{prefix}-{i}"},
            "spec": spec}


def percentiles(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values)
    return {"p50": float(np.percentile(arr, 50)), "p90": float(np.percentile(arr, 90)),
            "p99": float(np.percentile(arr, 99))}


def bench_algorithm(nodes: int, initial: int, pods: int, node_images: int = 0,
                    schedule_fragment: str = "none") -> dict[str, Any]:
    config = parse_config({}, "bench")
    cache = Cache()
    for i in range(nodes):
        cache.set_node(node_info(node_obj(i, node_images)))
    for i in range(initial):
        cache.add_pod(pod_info(pod_obj(i, "init", f"node-{i % nodes}")))
    pipeline = Pipeline(build_profile(config), seed=1)
    manager = None
    if schedule_fragment != "none":  # the pods' default logic, as the scheduler selects it
        manager = FragmentManager(cache.table, default=schedule_fragment)
        asyncio.run(manager.start())
    parsed = [pod_info(pod_obj(i)) for i in range(pods)]
    latencies = []
    start = time.perf_counter()
    unschedulable = 0
    for pod in parsed:
        t = time.perf_counter()
        ctx = CycleContext.for_pod(pod, cache.table)
        override = manager.select(pod).active if manager is not None else None
        if override is not None and override.evaluate_now is not None:
            override = override.evaluate_now(ctx, pipeline.base_feasible(ctx, override))
            if override is None:
                raise RuntimeError("the default fragment's calls could not run inline")
        result = pipeline.schedule(ctx, override)
        if result.node is None:
            unschedulable += 1
        else:
            cache.assume(pod, result.node)
        latencies.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - start
    t = time.perf_counter()
    for i in range(min(pods, 2000)):
        pod_info(pod_obj(i, "parse"))
    parse_us = (time.perf_counter() - t) / min(pods, 2000) * 1e6
    images = f" / {node_images} images per node" if node_images else ""
    logic = f" (scheduleFragment {schedule_fragment})" if manager is not None else ""
    return {"scenario": f"algorithm {nodes} nodes / {initial} initial / {pods} pods{images}"
                        f"{logic}",
            "pods_per_second": pods / elapsed, "unschedulable": unschedulable,
            "attempt_ms": {k: v * 1000 for k, v in percentiles(latencies).items()},
            "pod_parse_us": parse_us}


def _metric_quantiles(text: str, name: str) -> dict[str, float]:
    """p50/p99 from a Prometheus histogram's cumulative buckets (summed over labels)."""
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            bound = float("inf") if le == "+Inf" else float(le)
            buckets[bound] = buckets.get(bound, 0.0) + float(line.rsplit(" ", 1)[1])
    if not buckets:
        return {}
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    out = {}
    for q in (0.5, 0.99):
        for b in bounds:
            if buckets[b] >= q * total:
                out[f"p{int(q * 100)}_le_ms"] = b * 1000
                break
    return out


async def create_pods(c: Client, prefix: str, n: int, concurrency: int,
                      scheduler: str = "pyscheduler", fragment: str | None = None) -> None:
    """Create ``n`` measured pods (100m / 500Mi) in namespace ``bench`` from ``concurrency``
    workers; ``fragment``: the fragment resource each names in its annotation."""
    async def create(i: int) -> None:
        p = pod_obj(i, prefix)
        del p["metadata"]["uid"]
        p["spec"]["schedulerName"] = scheduler
        if fragment:
            p["metadata"]["annotations"] = {"wssp/schedulefragment": fragment}
        status, resp = await c.request("POST", "/api/v1/namespaces/bench/pods", p)
        if status != 201:
            raise RuntimeError(f"create failed {status}: {resp[:200]!r}")
    await run_pool(n, concurrency, create)


async def _e2e(args: argparse.Namespace, workdir: Path, sched_pid: int, server_pid: int,
               metrics_port: int) -> dict[str, Any]:
    import aiohttp
    import orjson

    c = Client(workdir / "kubeconfig", args.concurrency)
    try:
        await c.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
        bound_times: list[float] = []
        target = args.initial + args.pods
        done = asyncio.Event()
        status, body = await c.request("GET", "/api/v1/namespaces/bench/pods?limit=1")
        rv = orjson.loads(body)["metadata"]["resourceVersion"]
        watch = asyncio.create_task(count_bindings(
            c, "/api/v1/namespaces/bench/pods", rv, target, bound_times, done))

        if args.pod_fragment:
            await _serve_fragment(c, args.pod_fragment)

        async def create_all(prefix: str, n: int, scheduler: str = "pyscheduler") -> None:
            await create_pods(c, prefix, n, args.concurrency, scheduler,
                              FRAGMENT_RESOURCE if args.pod_fragment else None)

        await create_all("init", args.initial)
        while len(bound_times) < args.initial:
            await asyncio.sleep(0.1)
        cpu0 = cpu_seconds(sched_pid)
        server_cpu0 = cpu_seconds(server_pid)
        client_cpu0 = time.process_time()
        measured_from = len(bound_times)
        spy = _start_py_spy(args.py_spy, sched_pid) if args.py_spy else None
        t0 = time.monotonic()
        await create_all("pod", args.pods)
        try:
            await asyncio.wait_for(done.wait(), 600)
        except asyncio.TimeoutError:
            pass
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(sched_pid) - cpu0
        server_cpu = cpu_seconds(server_pid) - server_cpu0
        client_cpu = time.process_time() - client_cpu0
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            await asyncio.to_thread(spy.wait, 60)
        watch.cancel()
        samples = rate_samples(bound_times[measured_from:])
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{metrics_port}/metrics") as r:
                metrics_text = await r.text()
        _, hwm = rss_kib(sched_pid)

        # The bind ceiling of the same server, now: concurrent clients bind fresh pods (of
        # another scheduler name, so the running scheduler leaves them alone).
        await create_all("ceil", args.ceiling_pods, "bench-ceiling")
        ceiling_nodes = args.nodes

        async def bind(i: int) -> None:
            body = {"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": f"ceil-{i}", "namespace": "bench"},
                    "target": {"kind": "Node", "name": f"node-{i % ceiling_nodes}"}}
            status, resp = await c.request(
                "POST", f"/api/v1/namespaces/bench/pods/ceil-{i}/binding", body)
            if status != 201:
                raise RuntimeError(f"bind failed {status}: {resp[:200]!r}")
        tb = time.monotonic()
        await run_pool(args.ceiling_pods, args.concurrency, bind)
        ceiling = args.ceiling_pods / (time.monotonic() - tb)
        measured = len(bound_times) - args.initial
        return {
            "scenario": f"e2e {args.nodes} nodes / {args.initial} initial / {args.pods} pods"
                        f" (scheduleFragment {args.schedule_fragment}"
                        + (f", pods use the default fragment in {args.pod_fragment} mode"
                           if args.pod_fragment else "") + ")",
            "scheduled": measured,
            "pods_per_second": measured / elapsed if elapsed else 0.0,
            "throughput_samples": {"avg": statistics.mean(samples) if samples else 0.0,
                                   **({k: float(v) for k, v in zip(
                                       ("p50", "p90", "p99"),
                                       np.percentile(samples, [50, 90, 99]))} if samples
                                      else {})},
            "scheduler_cpu_seconds_per_1000_pods": cpu / max(measured, 1) * 1000,
            "api_server_cpu_seconds_per_1000_pods": server_cpu / max(measured, 1) * 1000,
            "bench_client_cpu_seconds_per_1000_pods": client_cpu / max(measured, 1) * 1000,
            "scheduler_peak_rss_mib": hwm / 1024,
            "attempt_latency": _metric_quantiles(
                metrics_text, "scheduler_scheduling_attempt_duration_seconds"),
            "bind_ceiling_per_second": ceiling,
        }
    finally:
        await c.session.close()


def _start_py_spy(out: Path, pid: int) -> subprocess.Popen[bytes]:
    """py-spy sampling the scheduler over the measured pods (its CPU share is then a little
    higher than without: py-spy itself runs on the same cores)."""
    spy = Path(sys.executable).with_name("py-spy")
    fmt = "speedscope" if out.suffix == ".json" else "raw" if out.suffix == ".txt" \
        else "flamegraph"
    return subprocess.Popen([str(spy), "record", "--pid", str(pid), "--rate", "200",
                             "--nonblocking", "--format", fmt, "--output", str(out)],
                            stdout=subprocess.DEVNULL)


async def _serve_fragment(c: Client, mode: str) -> None:
    """The CRD and a resource serving the packaged default fragment in ``mode``; returns
    once the scheduler reports it Ready."""
    import orjson
    status, resp = await c.request(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        yaml.safe_load(CRD.read_text()))
    if status not in (201, 409):
        raise RuntimeError(f"CRD create failed {status}: {resp[:200]!r}")
    path = "/apis/wssp.pyscheduler.io/v1alpha1/wsspschedulerconfigurations"
    body = {"apiVersion": "wssp.pyscheduler.io/v1alpha1", "kind": "WsspSchedulerConfiguration",
            "metadata": {"name": FRAGMENT_RESOURCE},
            "spec": {"url": (PACKAGED_FRAGMENTS / "default-v1.0.0.wasm").as_uri(),
                     "stages": {"filter": {"mode": mode},
                                "score": {"mode": mode, "weight": 1}}}}
    for _ in range(100):  # the CRD's resource is served a moment after the CRD is created
        status, resp = await c.request("POST", path, body)
        if status in (201, 409):
            break
        await asyncio.sleep(0.1)
    else:
        raise RuntimeError(f"fragment resource create failed {status}: {resp[:200]!r}")
    for _ in range(300):
        status, resp = await c.request("GET", f"{path}/{FRAGMENT_RESOURCE}")
        phase = (orjson.loads(resp).get("status") or {}).get("phase") if status == 200 else None
        if phase == "Ready":
            return
        if phase == "Failed":
            raise RuntimeError(f"fragment failed to load: {resp[:300]!r}")
        await asyncio.sleep(0.1)
    raise RuntimeError("the fragment resource did not become Ready in 30 s")


def scheduler_settings(port: int, schedule_fragment: str) -> dict[str, Any]:
    return {"leaderElection": {"enabled": False}, "metricsAddress": f"127.0.0.1:{port}",
            "logLevel": os.environ.get("BENCH_SCHEDULER_LOG_LEVEL", "warning"),
            "scheduleFragment": None if schedule_fragment == "none" else schedule_fragment,
            "storage": {"allowedFileDirs": [str(PACKAGED_FRAGMENTS)]}}


def bench_e2e(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        port = 10300 + os.getpid() % 1000
        with fake_nodes_and_scheduler(workdir, args.nodes, scheduler_settings(
                port, args.schedule_fragment)) as (sim, sched):
            try:
                import uvloop
                return uvloop.run(_e2e(args, workdir, sched.pid, sim.pid, port))
            except ImportError:
                return asyncio.run(_e2e(args, workdir, sched.pid, sim.pid, port))


async def _batch(c: Client, prefix: str, n: int, concurrency: int, sched_pid: int,
                 spy_to: Path | None = None) -> dict[str, float]:
    """Create ``n`` pods and wait for their bindings: pods/s from the start of their creation
    to the last binding, and the scheduler's CPU seconds per 1000 of them."""
    import orjson
    if n <= 0:
        return {"bound": 0, "pods_per_second": 0.0, "scheduler_cpu_seconds_per_1000_pods": 0.0}
    status, body = await c.request("GET", "/api/v1/namespaces/bench/pods?limit=1")
    rv = orjson.loads(body)["metadata"]["resourceVersion"]
    times: list[float] = []
    done = asyncio.Event()
    watch = asyncio.create_task(count_bindings(c, "/api/v1/namespaces/bench/pods", rv, n,
                                               times, done))
    spy = _start_py_spy(spy_to, sched_pid) if spy_to else None
    cpu0 = cpu_seconds(sched_pid)
    t0 = time.monotonic()
    try:
        await create_pods(c, prefix, n, concurrency)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(done.wait(), 600)
    finally:
        watch.cancel()
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            await asyncio.to_thread(spy.wait, 60)
    elapsed = (times[-1] if times else time.monotonic()) - t0
    return {"bound": len(times), "pods_per_second": len(times) / elapsed if elapsed else 0.0,
            "scheduler_cpu_seconds_per_1000_pods":
                (cpu_seconds(sched_pid) - cpu0) / max(len(times), 1) * 1000}


SIDES = ("shipped", "built-ins")


async def _pairs(args: argparse.Namespace, clusters: dict[str, tuple[Path, int]],
                 ) -> dict[str, Any]:
    clients = {label: Client(workdir / "kubeconfig", args.concurrency)
               for label, (workdir, _) in clusters.items()}
    try:
        for label, c in clients.items():
            await c.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
            await _batch(c, "init", args.initial, args.concurrency, clusters[label][1])
        batches: dict[str, list[dict[str, float]]] = {label: [] for label in clusters}
        for number, label in enumerate(abba(args.rounds, *SIDES)):
            spy_to = args.py_spy / f"pairs-{number}-{label}.txt" if args.py_spy else None
            batches[label].append(await _batch(clients[label], f"pod{number}", args.pods,
                                               args.concurrency, clusters[label][1], spy_to))
    finally:
        for c in clients.values():
            await c.session.close()
    shipped, builtins = batches["shipped"], batches["built-ins"]

    return {
        "scenario": f"pairs: e2e {args.nodes} nodes / {args.initial} initial / {args.pods} pods "
                    f"per batch, scheduleFragment {args.schedule_fragment} (shipped) against "
                    f"the built-ins alone, twin clusters, {args.rounds} rounds in ABBA order",
        "order": ", ".join(f"{label} {run['pods_per_second']:.0f}/s"
                           for label, run in in_order(abba(args.rounds, *SIDES), batches)),
        "ratio_per_pair": ", ".join(f"{a['pods_per_second'] / b['pods_per_second']:.2f}"
                                    for a, b in zip(shipped, builtins) if b["pods_per_second"]),
        "shipped_pods_per_second": pooled(shipped, "pods_per_second"),
        "builtins_pods_per_second": pooled(builtins, "pods_per_second"),
        "ratio_pooled": pooled(shipped, "pods_per_second")
                        / max(pooled(builtins, "pods_per_second"), 1e-9),
        "shipped_scheduler_cpu_seconds_per_1000_pods":
            pooled(shipped, "scheduler_cpu_seconds_per_1000_pods"),
        "builtins_scheduler_cpu_seconds_per_1000_pods":
            pooled(builtins, "scheduler_cpu_seconds_per_1000_pods"),
        "batches": {"shipped": shipped, "built-ins": builtins},
    }


def bench_pairs(args: argparse.Namespace) -> dict[str, Any]:
    """The shipped configuration and the built-ins alone, each with its own embedded cluster
    of ``--nodes`` nodes and ``--initial`` pods, both up at once; batches of ``--pods`` pods
    alternate between them."""
    with contextlib.ExitStack() as stack:
        clusters: dict[str, tuple[Path, int]] = {}
        for k, (label, fragment) in enumerate(zip(SIDES, (args.schedule_fragment, "none"))):
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            port = 10300 + (os.getpid() + k) % 1000
            _, sched = stack.enter_context(fake_nodes_and_scheduler(
                workdir, args.nodes, scheduler_settings(port, fragment)))
            clusters[label] = (workdir, sched.pid)
        try:
            import uvloop
            return uvloop.run(_pairs(args, clusters))
        except ImportError:
            return asyncio.run(_pairs(args, clusters))


def print_table(results: list[dict[str, Any]]) -> None:
    for r in results:
        print(f"\n== {r['scenario']}")
        for k, v in r.items():
            if k == "scenario":
                continue
            if isinstance(v, dict) and not all(isinstance(x, (int, float)) for x in v.values()):
                continue  # the details, in the JSON
            if isinstance(v, dict):
                v = ", ".join(f"{kk} {vv:.2f}" for kk, vv in v.items())
            elif isinstance(v, float):
                v = f"{v:.2f}"
            print(f"  {k:40s} {v}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["algorithm", "e2e", "pairs", "all"])
    parser.add_argument("--rounds", type=int, default=3,
                        help="pairs: rounds of one batch per configuration, in ABBA order")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--initial", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--ceiling-pods", type=int, default=5000)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--pod-fragment", choices=["replace", "extend"], default=None,
                        help="e2e: pods name a resource serving the default fragment in this "
                             "mode")
    parser.add_argument("--schedule-fragment", default="default:v1.0.0",
                        help="the scheduler's scheduleFragment (none: the built-ins alone)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="FILE",
                        help="e2e: sample the scheduler with py-spy over the measured pods "
                             "(FILE.txt: collapsed stacks, .json: speedscope, else SVG); "
                             "pairs: a directory, one FILE per batch")
    parser.add_argument("--node-images", type=int, default=0,
                        help="algorithm: images each node lists in status.images")
    args = parser.parse_args()
    results = []
    if args.mode in ("algorithm", "all"):
        results.append(bench_algorithm(args.nodes, args.initial, args.pods, args.node_images,
                                       args.schedule_fragment))
    if args.mode == "e2e":
        results.append(bench_e2e(args))
    if args.mode == "pairs":
        results.append(bench_pairs(args))
    if args.mode == "all":
        for nodes, initial, pods in ((100, 0, 1000), (500, 0, 1000), (5000, 1000, 10000)):
            results.append(bench_e2e(argparse.Namespace(**{
                **vars(args), "nodes": nodes, "initial": initial, "pods": pods})))
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

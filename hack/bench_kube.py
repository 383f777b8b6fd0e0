"""pyscheduler beside kube-scheduler on the same real kube-apiserver and the same node set.

Starts etcd and kube-apiserver from ``KUBEBUILDER_ASSETS`` (see ``pyscheduler_sim.envtest``;
``--kubeconfig`` uses a server you run instead), registers NODES nodes of 4 CPU / 32Gi / 110
pods that run no pods (scheduler_perf's fake nodes), then runs batches in ABBA order: for each,
PODS pods (100m / 500Mi) are created for one scheduler, the scheduler is started in its own
process (kube-scheduler from the same assets with its default profile and qps/burst raised;
pyscheduler as shipped, with the default fragment), and the batch ends when every pod is bound.
Each batch prints (1 s samples, first dropped, as scheduler_perf measures):

* start -> first binding, and pods/s from the first binding to the last,
* CPU seconds per 1000 pods of the scheduler and of kube-apiserver: over the whole batch (the
  scheduler's start-up and initial lists included), and from the first binding to the last.

The pods are deleted and the scheduler stopped between batches. Nothing is asserted about
time. Usage:
    KUBEBUILDER_ASSETS=$(../shared/kube/install.sh) python hack/bench_kube.py \\
        [--nodes 1000] [--pods 3000] [--rounds 2] [--kubeconfig KC --apiserver-pid PID]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1]
                                                            / "sim")]

from bench_apiserver import (  # noqa: E402
    Client,
    abba,
    count_bindings,
    cpu_seconds,
    in_order,
    interrupt,
    pooled,
    rate_samples,
    run_pool,
    run_scheduler,
)
from bench_scheduler import node_obj, scheduler_settings  # noqa: E402

SIDES = {"pyscheduler": "pyscheduler", "kube-scheduler": "default-scheduler"}


def kube_scheduler(assets: Path, workdir: Path, kubeconfig: Path) -> subprocess.Popen[bytes]:
    config = workdir / "kube-scheduler.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 5000},
        "leaderElection": {"leaderElect": False}}))
    log = open(workdir / "kube-scheduler.log", "ab")  # noqa: SIM115
    return subprocess.Popen([str(assets / "kube-scheduler"), "--config", str(config),
                             "--secure-port", "0", "-v", "0"], stdout=log, stderr=log)


def pyscheduler(workdir: Path, kubeconfig: Path) -> subprocess.Popen[bytes]:
    config = workdir / "pyscheduler.yaml"
    port = 10300 + os.getpid() % 1000
    config.write_text(yaml.safe_dump(scheduler_settings(port, "default:v1.0.0")))
    return run_scheduler(kubeconfig, config, {**os.environ, "PYTHONUNBUFFERED": "1"})


async def _batch(c: Client, side: str, args: argparse.Namespace, workdir: Path,
                 kubeconfig: Path, server_pid: int | None, index: int) -> dict[str, Any]:
    prefix = f"b{index}"
    scheduler_name = SIDES[side]

    async def create(i: int) -> None:
        pod = {"metadata": {"name": f"{prefix}-{i}", "namespace": "bench"},
               "spec": {"schedulerName": scheduler_name, "containers": [{
                   "name": "c", "image": "registry.k8s.io/pause:3.10",
                   "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}
        status, body = await c.request("POST", "/api/v1/namespaces/bench/pods", pod)
        if status != 201:
            raise RuntimeError(f"create failed {status}: {body[:200]!r}")
    await run_pool(args.pods, args.concurrency, create)
    status, body = await c.request("GET", "/api/v1/namespaces/bench/pods?limit=1")
    rv = orjson.loads(body)["metadata"]["resourceVersion"]
    times: list[float] = []
    done = asyncio.Event()
    watch = asyncio.create_task(count_bindings(c, "/api/v1/namespaces/bench/pods", rv,
                                               args.pods, times, done))
    server_cpu0 = cpu_seconds(server_pid) if server_pid else 0.0
    started = time.monotonic()
    proc = (kube_scheduler(Path(os.environ["KUBEBUILDER_ASSETS"]), workdir, kubeconfig)
            if side == "kube-scheduler" else pyscheduler(workdir, kubeconfig))
    first_cpu: list[float] = []

    async def at_first_binding() -> None:
        while not times:
            await asyncio.sleep(0.005)
        first_cpu[:] = [cpu_seconds(proc.pid),
                        cpu_seconds(server_pid) if server_pid else float("nan")]
    first = asyncio.create_task(at_first_binding())
    try:
        await asyncio.wait_for(done.wait(), args.timeout)
        await first
        sched_cpu = cpu_seconds(proc.pid)
        server_cpu = cpu_seconds(server_pid) - server_cpu0 if server_pid else float("nan")
    except asyncio.TimeoutError:
        raise RuntimeError(f"{side}: {len(times)} of {args.pods} bound in {args.timeout} s")
    finally:
        watch.cancel()
        first.cancel()
        interrupt(proc)
    samples = rate_samples(times)
    span = max(times) - min(times)
    result = {
        "side": side, "bound": len(times),
        "first_binding_seconds": min(times) - started,
        "pods_per_second": (len(times) - 1) / span if span else 0.0,
        "samples_p50": statistics.median(samples) if samples else 0,
        # The whole process's CPU, start-up and initial lists included, per 1000 pods ...
        "scheduler_cpu_per_1000": sched_cpu / len(times) * 1000,
        "apiserver_cpu_per_1000": server_cpu / len(times) * 1000,
        # ... and from the first binding to the last (the steady cost per pod).
        "scheduler_steady_cpu_per_1000": (sched_cpu - first_cpu[0]) / max(len(times) - 1, 1)
        * 1000,
        "apiserver_steady_cpu_per_1000": (server_cpu + server_cpu0 - first_cpu[1])
        / max(len(times) - 1, 1) * 1000 if server_pid else float("nan"),
    }
    await c.request("DELETE", "/api/v1/namespaces/bench/pods?gracePeriodSeconds=0")
    while True:
        _, body = await c.request("GET", "/api/v1/namespaces/bench/pods?limit=1")
        if not orjson.loads(body)["items"]:
            break
        await asyncio.sleep(0.2)
    return result


async def _run(args: argparse.Namespace, workdir: Path, kubeconfig: Path,
               server_pid: int | None) -> list[dict[str, Any]]:
    c = Client(kubeconfig, args.concurrency)
    try:
        await c.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})

        async def node(i: int) -> None:
            status, body = await c.request("POST", "/api/v1/nodes", node_obj(i))
            if status not in (201, 409):
                raise RuntimeError(f"node create failed {status}: {body[:200]!r}")
        await run_pool(args.nodes, args.concurrency, node)
        results = []
        for index, side in enumerate(abba(args.rounds, "pyscheduler", "kube-scheduler")):
            result = await _batch(c, side, args, workdir, kubeconfig, server_pid, index)
            print(f"  batch {index + 1} {side:15} first binding {result['first_binding_seconds']:5.2f} s"
                  f"  {result['pods_per_second']:7.0f} pods/s"
                  f"  CPU s/1000 pods (whole run; from the first binding): scheduler "
                  f"{result['scheduler_cpu_per_1000']:5.2f}; "
                  f"{result['scheduler_steady_cpu_per_1000']:5.2f}, kube-apiserver "
                  f"{result['apiserver_cpu_per_1000']:5.2f}; "
                  f"{result['apiserver_steady_cpu_per_1000']:5.2f}", flush=True)
            results.append(result)
        return results
    finally:
        await c.session.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="a real server of your own (token or certificate kubeconfig)")
    parser.add_argument("--apiserver-pid", type=int, default=None,
                        help="with --kubeconfig: the kube-apiserver process, for its CPU")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from pyscheduler_sim.envtest import ControlPlane, missing_assets

    reason = missing_assets(("kube-scheduler",) if args.kubeconfig
                            else ("kube-apiserver", "etcd", "kube-scheduler"))
    if reason:  # make bench goes on with the benchmarks that need no real server
        print(f"bench_kube skipped: {reason}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        plane = None
        if args.kubeconfig:
            kubeconfig, server_pid = args.kubeconfig, args.apiserver_pid
        else:
            plane = ControlPlane(controllers=None).start()
            kubeconfig = plane.kubeconfig
            server_pid = next(p.popen.pid for p in plane.processes
                              if p.name == "kube-apiserver")
        print(f"{args.nodes} nodes, {args.pods} pods a batch, {args.rounds} rounds (ABBA), "
              f"kube-apiserver {'of ' + str(args.kubeconfig) if args.kubeconfig else 'from ' + os.environ['KUBEBUILDER_ASSETS']}",
              flush=True)
        try:
            results = asyncio.run(_run(args, workdir, kubeconfig, server_pid))
        finally:
            if plane is not None:
                plane.stop()
            if os.environ.get("BENCH_KEEP_LOGS"):
                shutil.copytree(workdir, os.environ["BENCH_KEEP_LOGS"], dirs_exist_ok=True)
    print("\npooled over the batches of each side:")
    summary: dict[str, Any] = {}
    for side in SIDES:
        mine = [r for _, r in in_order(abba(args.rounds, "pyscheduler", "kube-scheduler"),
                                       {s: [r for r in results if r["side"] == s]
                                        for s in SIDES}) if r["side"] == side]
        summary[side] = {key: pooled(mine, key) for key in (
            "pods_per_second", "scheduler_cpu_per_1000", "apiserver_cpu_per_1000",
            "scheduler_steady_cpu_per_1000", "apiserver_steady_cpu_per_1000",
            "first_binding_seconds")}
        s = summary[side]
        print(f"  {side:15} {s['pods_per_second']:7.0f} pods/s, first binding "
              f"{s['first_binding_seconds']:.2f} s, CPU s/1000 pods (whole run; from the first "
              f"binding): scheduler {s['scheduler_cpu_per_1000']:.2f}; "
              f"{s['scheduler_steady_cpu_per_1000']:.2f}, kube-apiserver "
              f"{s['apiserver_cpu_per_1000']:.2f}; {s['apiserver_steady_cpu_per_1000']:.2f}")
    py, kube = summary["pyscheduler"], summary["kube-scheduler"]
    if kube["pods_per_second"] and py["scheduler_cpu_per_1000"]:
        print(f"  pyscheduler / kube-scheduler: {py['pods_per_second'] / kube['pods_per_second']:.2f}x"
              f" pods/s; {kube['scheduler_cpu_per_1000'] / py['scheduler_cpu_per_1000']:.2f}x"
              " less scheduler CPU per pod over the whole run, "
              f"{kube['scheduler_steady_cpu_per_1000'] / py['scheduler_steady_cpu_per_1000']:.2f}x"
              " from the first binding")
    if args.json:
        args.json.write_text(json.dumps({"batches": results, "pooled": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

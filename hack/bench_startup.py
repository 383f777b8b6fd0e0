"""Start-up of ``pyscheduler run``: from exec to the first binding (figures, no assertions).

``pyscheduler sim up`` holds N nodes of 4 CPU / 32Gi / 110 pods (running no pods, as
scheduler_perf's fake nodes), optionally ``--bound`` pods already bound to them, and one pending
pod. Each repeat execs ``pyscheduler run`` (the shipped configuration unless
``--schedule-fragment`` says otherwise; leader election on, as shipped) and times, from just
before the exec:

* ``ready``: the first ``/readyz`` that answers 200 (informers synced; polled every 10 ms);
* ``bound``: the pending pod's binding, seen by a watch on the API server.

The API server is the embedded one, cheaper per request than a real kube-apiserver with
etcd: the initial lists (most of the time with many pods) take longer against a real one.

Then the scheduler is interrupted (it releases its Lease, so the next one acquires at once), the
pod replaced by a new pending one, and the next repeat starts. Reports min / median / max of each.

    python hack/bench_startup.py --nodes 1000 --repeat 5
    python hack/bench_startup.py --nodes 5000 --repeat 5
    python hack/bench_startup.py --nodes 5000 --bound 150000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_apiserver import Client, interrupt, rss_kib, run_pool, sim_up  # noqa: E402

PACKAGED_FRAGMENTS = Path(__file__).resolve().parents[1] / "pyscheduler" / "wasm" / "fragments"


def pod_obj(name: str, node: str = "", app: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "pyscheduler", "containers": [{
        "name": "c", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "bench",
                         "labels": {"app": f"app-{app}"}}, "spec": spec}


async def _wait_bound(c: Client, name: str, rv: str) -> float:
    import orjson

    url = (f"{c.base}/api/v1/namespaces/bench/pods?watch=true&resourceVersion={rv}"
           f"&fieldSelector=metadata.name%3D{name}&timeoutSeconds=600")
    async with c.session.get(url) as resp:
        async for line in resp.content:
            ev = orjson.loads(line)
            if ev["type"] in ("ADDED", "MODIFIED") and ev["object"]["spec"].get("nodeName"):
                return time.monotonic()
    raise RuntimeError(f"the watch ended before {name} was bound")


async def _wait_ready(port: int, proc: subprocess.Popen[bytes]) -> float:
    import aiohttp

    async with aiohttp.ClientSession() as s:
        while proc.poll() is None:
            try:
                async with s.get(f"http://127.0.0.1:{port}/readyz") as r:
                    if r.status == 200:
                        return time.monotonic()
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.01)
    raise RuntimeError(f"the scheduler exited ({proc.returncode}) before it was ready")


async def _run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import orjson

    c = Client(workdir / "kubeconfig", 32)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = open(args.log, "ab") if args.log else subprocess.DEVNULL  # noqa: SIM115
    try:
        await c.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
        if args.bound:
            async def create(i: int) -> None:
                body = pod_obj(f"bound-{i}", f"node-{i % args.nodes}", i % 50)
                status, resp = await c.request("POST", "/api/v1/namespaces/bench/pods", body)
                if status != 201:
                    raise RuntimeError(f"create failed {status}: {resp[:200]!r}")
            t = time.monotonic()
            await run_pool(args.bound, 32, create)
            print(f"created {args.bound} bound pods in {time.monotonic() - t:.1f} s",
                  file=sys.stderr)
        ready: list[float] = []
        bound: list[float] = []
        rss: list[float] = []
        for r in range(args.repeat):
            name = f"pending-{r}"
            status, body = await c.request("POST", "/api/v1/namespaces/bench/pods",
                                           pod_obj(name))
            if status != 201:
                raise RuntimeError(f"create failed {status}: {body[:200]!r}")
            rv = orjson.loads(body)["metadata"]["resourceVersion"]
            t0 = time.monotonic()
            proc = subprocess.Popen(
                [*args.wrap.split(), sys.executable, "-m", "pyscheduler.cli", "run", "--kubeconfig",
                 str(workdir / "kubeconfig"), "--config", str(workdir / "sched.yaml")],
                stdout=log, stderr=log, env=env)
            try:
                watch = asyncio.ensure_future(_wait_bound(c, name, rv))
                ready_at = await _wait_ready(args.port, proc)
                bound_at = await asyncio.wait_for(watch, 600)
                ready.append(ready_at - t0)
                bound.append(bound_at - t0)
                rss.append(rss_kib(proc.pid)[1] / 1024)
                print(f"run {r + 1}: ready {ready[-1]:.3f} s, first binding {bound[-1]:.3f} s,"
                      f" peak RSS {rss[-1]:.0f} MiB", file=sys.stderr)
            finally:
                interrupt(proc)
            await c.request("DELETE", f"/api/v1/namespaces/bench/pods/{name}")

        def summary(values: list[float]) -> dict[str, float]:
            return {"min": min(values), "median": statistics.median(values),
                    "max": max(values)}

        return {"scenario": f"start-up, {args.nodes} nodes / {args.bound} bound pods"
                            f" (scheduleFragment {args.schedule_fragment})",
                "ready_seconds": summary(ready), "first_binding_seconds": summary(bound),
                "peak_rss_mib": summary(rss)}
    finally:
        await c.session.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--bound", type=int, default=0, help="pods created already bound")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--schedule-fragment", default="default:v1.0.0",
                        help="the scheduler's scheduleFragment ('none' for the built-ins alone)")
    parser.add_argument("--wrap", default="",
                        help="a command to run the scheduler under, e.g. 'py-spy record -o"
                             " FILE --'")
    parser.add_argument("--log", default=None, help="append the scheduler's output here")
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    args = parser.parse_args()
    args.port = 10300 + os.getpid() % 1000
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "cluster.yaml").write_text(yaml.safe_dump({
            "nodePools": [{"name": "node", "count": args.nodes, "cpu": "4", "memory": "32Gi",
                           "pods": 110}], "kubelet": {"runPods": False}}))
        (workdir / "sched.yaml").write_text(yaml.safe_dump({
            "metricsAddress": f"127.0.0.1:{args.port}", "logLevel": "warning",
            "scheduleFragment": None if args.schedule_fragment == "none"
            else args.schedule_fragment,
            "storage": {"allowedFileDirs": [str(PACKAGED_FRAGMENTS)]}}))
        sim = sim_up(workdir, workdir / "cluster.yaml", "--watch-history", "50000",
                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            result = asyncio.run(_run(args, workdir))
        finally:
            interrupt(sim)
    for key in ("ready_seconds", "first_binding_seconds", "peak_rss_mib"):
        v = result[key]
        print(f"{result['scenario']}: {key} min {v['min']:.3f} median {v['median']:.3f}"
              f" max {v['max']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

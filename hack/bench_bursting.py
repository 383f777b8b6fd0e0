"""Bursting benchmark (figures, no assertions).

``pyscheduler sim up`` (the embedded cluster and the simulated cloud, one process) and
``pyscheduler run`` (another process) as a user would run them: 4 real nodes of 4 CPU are
filled with 32 pods of 500m, then a Deployment of N pods that no real node fits bursts to a
cloud pool at zero creation latency; measured until every pod is Running (rate, and per pod
creation → Ready p50/p99, and the CPU time each process used per 100 pods). Then the fillers
are scaled to zero and the time until 32 burst pods are back on real nodes is measured (aim:
within two rebalancer sweeps).

    python hack/bench_bursting.py --pods 1000
"""

from __future__ import annotations

import asyncio
import argparse
import calendar
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from tests.conftest import wait_for  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_apiserver import Client, cpu_seconds, interrupt, run_scheduler, sim_up  # noqa: E402


def _seconds(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


async def follow_running(kubeconfig: Path, rv: str, target: int, running: set[str],
                         finished: list[float]) -> None:
    """Watch the burst Deployment's pods from ``rv`` until ``target`` are Running; append the
    time that happened to ``finished``."""
    c = Client(kubeconfig, 1)
    try:
        url = (f"{c.base}/api/v1/namespaces/default/pods?watch=true&labelSelector=app%3Dburst"
               f"&resourceVersion={rv}&timeoutSeconds=900")
        async with c.session.get(url) as resp:
            async for line in resp.content:
                obj = orjson.loads(line)["object"]
                if (obj.get("status") or {}).get("phase") == "Running":
                    running.add(obj["metadata"]["uid"])
                    if len(running) >= target:
                        finished.append(time.monotonic())
                        return
    finally:
        await c.session.close()


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "schedulerName": "pyscheduler", "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "pause", "resources": {
                             "requests": {"cpu": "500m", "memory": "128Mi"}}}]}}}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--sweep", type=float, default=5.0, help="rebalancer interval (s)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    n = args.pods
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "cluster.yaml").write_text(yaml.safe_dump({
            "nodePools": [{"name": "real", "count": 4, "cpu": "4", "memory": "16Gi"}],
            "kubelet": {"podStartSeconds": 0.01},
            "cloudPools": [{"name": "aci", "platform": "azure", "cpu": str(n),
                            "memory": f"{n}Gi", "instances": n + 10,
                            "creationLatencySeconds": 0}]}))
        sim = sim_up(work, work / "cluster.yaml", "--watch-history", "50000", env=env)
        sched = None
        try:
            settings = yaml.safe_load((work / "scheduler.yaml").read_text())
            settings.update(logLevel="warning", scheduleFragment=None,
                            leaderElection={"enabled": False},
                            metricsAddress=f"127.0.0.1:{10400 + os.getpid() % 1000}")
            settings["rebalancer"].update(intervalSeconds=args.sweep, minCloudSeconds=0.1,
                                          maxMovesPerCycle=10000, maxMovesPerNamespace=10000)
            (work / "sched.yaml").write_text(yaml.safe_dump(settings))
            sched = run_scheduler(work / "kubeconfig", work / "sched.yaml", env)
            api = config.new_client_from_config(config_file=str(work / "kubeconfig"))
            core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
            wait_for(lambda: core.list_node(label_selector="type=virtual-kubelet").items,
                     timeout=60)

            def running(app: str) -> list[dict[str, Any]]:
                raw = core.list_namespaced_pod("default", label_selector=f"app={app}",
                                               _preload_content=False)
                return [p for p in orjson.loads(raw.data)["items"]
                        if (p.get("status") or {}).get("phase") == "Running"]
            apps.create_namespaced_deployment("default", deployment("filler", 32))
            wait_for(lambda: len(running("filler")) == 32, timeout=120, interval=0.5)
            # A watch (decoded with orjson in its own thread) notes when the last pod turns
            # Running: polling lists of thousands of pods would load the machine it measures.
            rv = orjson.loads(core.list_namespaced_pod(
                "default", limit=1, _preload_content=False).data)["metadata"]["resourceVersion"]
            seen_running: set[str] = set()
            finished: list[float] = []
            watcher = threading.Thread(target=lambda: asyncio.run(follow_running(
                work / "kubeconfig", rv, n, seen_running, finished)), daemon=True)
            watcher.start()
            t0 = time.monotonic()
            cpu0 = {"scheduler": cpu_seconds(sched.pid), "cluster_and_cloud": cpu_seconds(sim.pid)}
            apps.create_namespaced_deployment("default", deployment("burst", n))
            watcher.join(900)
            cpu = {k: cpu_seconds(p.pid) - cpu0[k]
                   for k, p in (("scheduler", sched), ("cluster_and_cloud", sim))}
            if not finished:
                raise RuntimeError(f"only {len(seen_running)} of {n} pods turned Running")
            elapsed = finished[0] - t0
            per_pod = []
            for p in running("burst"):
                ready = [_seconds(c["lastTransitionTime"]) for c in p["status"].get(
                    "conditions") or () if c["type"] == "Ready" and c["status"] == "True"]
                if ready:
                    per_pod.append(ready[0] - _seconds(p["metadata"]["creationTimestamp"]))
            on_cloud = sum(1 for p in running("burst")
                           if p["spec"]["nodeName"].startswith("wssp-virtual-"))
            t1 = time.monotonic()
            apps.patch_namespaced_deployment_scale("filler", "default",
                                                   {"spec": {"replicas": 0}})
            wait_for(lambda: sum(1 for p in running("burst")
                                 if p["spec"]["nodeName"].startswith("real")) >= 32,
                     timeout=300, interval=0.5)
            back = time.monotonic() - t1
        finally:
            interrupt(sched, sim)
    result = {
        "scenario": f"burst of {n} pods to the simulated cloud (zero creation latency)",
        "pods_on_cloud": on_cloud,
        "all_running_seconds": elapsed, "pods_per_second": n / elapsed,
        "cpu_seconds_per_100_pods": {k: v / n * 100 for k, v in cpu.items()},
        "create_to_ready_seconds": {"p50": float(np.percentile(per_pod, 50)),
                                    "p99": float(np.percentile(per_pod, 99))},
        "move_back_32_pods_seconds": back, "sweep_interval_seconds": args.sweep,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

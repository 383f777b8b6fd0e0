"""Bursting benchmark (figures, no assertions): a burst of N pods that no real node fits goes to
the simulated cloud at zero creation latency; measured until every pod is Running (rate and per
pod p50/p99 from creation to Running). Then real capacity is added and the time until the
rebalancer has moved the matching pods back is measured (aim: within two sweep intervals).

    python hack/bench_bursting.py --pods 1000
"""

from __future__ import annotations

import argparse
import calendar
import json
import sys
import time
from pathlib import Path
from typing import Any

import orjson

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from pyscheduler.sim.cluster import ClusterSpec, PoolSpec  # noqa: E402
from pyscheduler.sim.harness import BackgroundCluster  # noqa: E402
from pyscheduler.virtual.cloudsim import BackgroundCloudSim  # noqa: E402
from pyscheduler.virtual.cloudsim import PoolSpec as CloudPool  # noqa: E402
from tests.conftest import SchedulerThread, wait_for  # noqa: E402


def _seconds(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--sweep", type=float, default=5.0, help="rebalancer interval (s)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    n = args.pods
    import tempfile
    pools = [CloudPool("aci", "azure", cpu_millis=n * 1000, memory_bytes=n * 2**30,
                       instances=n + 10, creation_latency_seconds=0.0)]
    spec = ClusterSpec(pools=[PoolSpec(name="real", count=4, cpu="4", memory="16Gi")],
                       pod_start_seconds=0.01, lease_renew_seconds=10)
    with tempfile.TemporaryDirectory() as tmp, BackgroundCloudSim(pools) as cloud, \
            BackgroundCluster(spec, Path(tmp)) as sim:
        api = config.new_client_from_config(config_file=str(sim.kubeconfig))
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        s = SchedulerThread(sim.kubeconfig, schedulerName="burst", logLevel="warning",
                            leaderElection={"enabled": False}, scheduleFragment=None,
                            virtualNodes={"enabled": True, "cloudUrl": cloud.url,
                                          "pools": [{"name": "aci", "platform": "azure"}]},
                            rebalancer={"intervalSeconds": args.sweep, "minCloudSeconds": 0.1,
                                        "maxMovesPerCycle": 10000,
                                        "maxMovesPerNamespace": 10000}).start()
        try:
            wait_for(lambda: core.list_node(label_selector="type=virtual-kubelet").items,
                     timeout=30)
            def deployment(name: str, replicas: int) -> dict[str, object]:
                return {
                    "metadata": {"name": name},
                    "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                             "template": {"metadata": {"labels": {"app": name}}, "spec": {
                                 "schedulerName": "burst", "terminationGracePeriodSeconds": 0,
                                 "containers": [{"name": "c", "image": "pause", "resources": {
                                     "requests": {"cpu": "500m", "memory": "128Mi"}}}]}}}}
            # Fill the 4 real nodes (16 cpu) with 32 pods of 500m, then burst.
            apps.create_namespaced_deployment("default", deployment("filler", 32))
            wait_for(lambda: sum(1 for p in core.list_namespaced_pod(
                "default", label_selector="app=filler").items if p.status.phase == "Running")
                == 32, timeout=120, interval=1.0)
            t0 = time.monotonic()
            apps.create_namespaced_deployment("default", deployment("burst", n))

            def running() -> list[dict[str, Any]]:
                # Raw JSON: the typed client's decode of 1000 pods would dominate this process
                # (the cluster, the cloud and the scheduler share it).
                raw = core.list_namespaced_pod("default", label_selector="app=burst",
                                               _preload_content=False)
                return [p for p in orjson.loads(raw.data)["items"]
                        if (p.get("status") or {}).get("phase") == "Running"]
            wait_for(lambda: len(running()) >= n, timeout=600, interval=1.0)
            elapsed = time.monotonic() - t0
            per_pod = []
            for p in running():
                start = _seconds(p["metadata"]["creationTimestamp"])
                ready = [_seconds(c["lastTransitionTime"]) for c in p["status"].get(
                    "conditions") or () if c["type"] == "Ready" and c["status"] == "True"]
                if ready:
                    per_pod.append(ready[0] - start)
            on_cloud = sum(1 for p in running() if p["spec"]["nodeName"] == "wssp-virtual-aci")
            # Free the real nodes: 32 burst pods should come back.
            t1 = time.monotonic()
            apps.patch_namespaced_deployment_scale("filler", "default", {"spec": {"replicas": 0}})

            def on_real() -> int:
                return sum(1 for p in running() if p["spec"]["nodeName"].startswith("real"))
            wait_for(lambda: on_real() >= 32, timeout=300, interval=0.5)
            back = time.monotonic() - t1
        finally:
            s.stop()
    result = {
        "scenario": f"burst of {n} pods to the simulated cloud (zero creation latency)",
        "pods_on_cloud": on_cloud,
        "all_running_seconds": elapsed, "pods_per_second": n / elapsed,
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
